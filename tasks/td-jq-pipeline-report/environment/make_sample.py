import json, random
from cigen import make
data = make(3, [("web", "frontend"), ("api", "backend"), ("tools", None)], 12)
print(json.dumps(data, indent=2))
