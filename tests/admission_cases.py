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
    # Found by the differential fuzzing against Multus' own parser (tests/e2e/
    # test_multus_attaches_only_what_admission_admits.py): each attaches only vision's NADs and
    # was refused before.
    "vision /ib-vision",  # Multus trims the namespace (strings.TrimSpace)
    "\tvision\u2003/\u00a0ib-vision\u3000",  # ... of Unicode white space too, as CEL's trim() does
    "/ib-vision",  # an empty namespace is the pod's
    "ib-vision@\u00e9th0, ib-vision@a\\b",  # any interface name Multus takes, in the comma form
    '[{"name":"ib-vision","namespace":""}]',  # an empty namespace is the pod's
    '[{"name":"ib-vision","namespace":null}]',
    '[{"name":"ib-vision","ips":["10.0.0.5/24", "::1/128"]}]',  # a string starting with a colon
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
    ("speech /ib-speech", {"text-namespace"}),
    ("\u00a0speech\t/ib", {"text-namespace"}),
    ("\x1cvision/ib", {"text-namespace"}),  # U+001C is not white space to Go (nor to CEL's trim)
    ("\u200bvision/ib", {"text-namespace"}),  # nor is the zero-width space
    ('[{"name":"ib","namespace":"","namespace":"speech"}]', {"json-namespace"}),  # the last one wins
    ('[{"name":"ib","namespace":null,"namespace":"speech"}]', {"json-namespace"}),
    ('[{"name":"ib","namespace":"nullx"}]', {"json-namespace"}),
    ('[{"name":"ib","ips":["10.0.0.1", "::1"],"deviceID":"0000:af:06.1"}]', {"allowed-keys"}),
    ('[{"name":"ib-vision","interface":"\u00e9"}]', {"alphabet"}),  # the JSON form stays ASCII
]
