"""Network-annotation cases of the team admission guard, shared by the Python-mirror tests
(tests/tenancy/test_teams.py) and the real-CEL tests (tests/tenancy/test_admission_cel.py): one list, two judges.

Pods are in namespace ``vision``; every refused case names the checks it must fail.
"""

from __future__ import annotations

from typing import Final

ALLOWED: Final = [
    "",
    "ib-vision",
    "ib-vision@ib0, other-net",
    "vision/ib-vision",
    " vision/ib-vision@net1",
    '[{"name":"ib-vision"}]',
    '[{"name": "ib-vision", "namespace": "vision", "interface": "net1", "ips": ["10.0.0.1/24"]}]',
    '[{"name":"x","ips":["fd00::1/64"],"mac":"02:00:00:00:00:01","default-route":["10.0.0.1"]}]',
]
REFUSED: Final[list[tuple[str, set[str]]]] = [
    ("speech/ib-speech", {"text-namespace"}),
    ("ib-vision, speech/ib-speech", {"text-namespace"}),
    ("visionx/ib", {"text-namespace"}),
    ("default/ib", {"text-namespace"}),
    ('[{"name":"ib-speech","namespace":"speech"}]', {"json-namespace"}),
    ('[{"name":"ib","namespace":"vision"},{"name":"ib","namespace":"default"}]', {"json-namespace"}),
    ('[{"name":"ib","namespace":"vision-x"}]', {"json-namespace"}),
    ('[{"name":"ib","namespace":"vision","namespace":"speech"}]', {"json-namespace"}),
    ('[{"name":"ib","cni-args":{"guid":"02:00:00:00:00:00:10:00"}}]', {"no-cni-args", "allowed-keys"}),
    ('[{"name":"ib","CNI-Args":{"guid":"x"}}]', {"no-cni-args", "allowed-keys"}),
    ('[{"name":"ib","infiniband-guid":"02:00:00:00:00:00:10:00"}]', {"no-cni-args", "allowed-keys"}),
    ('[{"name":"ib","Namespace":"speech"}]', {"allowed-keys"}),
    ('[{"name":"ib","portMappings":[]}]', {"allowed-keys"}),
    ('[{"name":"ib","names\\u0070ace":"speech"}]', {"alphabet"}),
    ('[{"name":"ib","nameſpace":"speech"}]', {"alphabet"}),
]
