"""The gpuaas component provider: what the engine runs for `pulumi package add` and the consumer's runs.

The language host starts ``python <this folder> <engine address> ...``; the components are the
repository's own (``components/``, one folder up).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# After the repository root is on the path.
from components.package.provider import serve

if __name__ == "__main__":
    serve(sys.argv[1:])
