#!/bin/bash
# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
set -e
cd /app/unitconv/src/unitconv
# 1. implicit relative imports do not exist in Python 3
sed -i 's/^from core import/from .core import/; s/^from registry import/from .registry import/' __init__.py
# 2. core <-> registry import each other at module level: move the exception to its own module
cat > errors.py <<'PY'
"""Exceptions of unitconv."""


class UnitError(ValueError):
    """An unknown unit, or two units of different kinds."""
PY
python3 - <<'PY'
import re
from pathlib import Path
core = Path("core.py").read_text()
core = core.replace("from .registry import lookup\n",
                    "from .errors import UnitError\nfrom .registry import lookup\n")
core = re.sub(r'\n\nclass UnitError\(ValueError\):\n    """[^"]*"""\n', "\n", core)
Path("core.py").write_text(core)
reg = Path("registry.py").read_text()
reg = reg.replace("from .core import UnitError", "from .errors import UnitError")
reg = reg.replace("import json\n", "import json\nfrom pathlib import Path\n")
# 3. the unit table is package data: find it next to the module, not in the cwd
reg = reg.replace('open("units.json", encoding="utf-8")',
                  'open(Path(__file__).with_name("units.json"), encoding="utf-8")')
Path("registry.py").write_text(reg)
PY
# 4. python3 -m unitconv needs a __main__ module
cat > __main__.py <<'PY'
import sys

from .cli import main

sys.exit(main())
PY
# 5. the wrapper must find src/ relative to its real location
cat > /app/unitconv/bin/unitconv <<'SH'
#!/bin/sh
# Runs the unitconv command line from this checkout.
here=$(dirname "$(readlink -f "$0")")
PYTHONPATH="$here/../src${PYTHONPATH:+:$PYTHONPATH}" exec python3 -m unitconv "$@"
SH
chmod +x /app/unitconv/bin/unitconv
cd /tmp
PYTHONPATH=/app/unitconv/src python3 -m unitconv 5 km mi
/app/unitconv/bin/unitconv 100 C F
