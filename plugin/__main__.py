"""The gke-tpu-slicing package's plugin: serves its components to the Pulumi engine (docs/package.md).

The Python language host runs this file as `python plugin/ <engine address> ...`; the components live in the
repository beside this directory, so its root goes on the import path first.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from components.package.provider import main

if __name__ == "__main__":
    main()
