import re
import subprocess
import unittest
from pathlib import Path

PATTERN = re.compile(r"^TOTAL: (\d+\.\d{2})$")


class Invoice(unittest.TestCase):
    def _total(self, path):
        out = subprocess.run(["python3", "/app/invoice.py", path], capture_output=True, text=True).stdout.strip()
        m = PATTERN.match(out)
        self.assertIsNotNone(m, f"unexpected output {out!r}")
        return m.group(1)

    def test_sample(self):
        self.assertEqual(self._total("/app/items.json"), "299.05")

    def test_other_items(self):
        Path("/tmp/other.json").write_text('[{"price": 12.5, "qty": 4}, {"price": 3.99, "qty": 10}]')
        self.assertEqual(self._total("/tmp/other.json"), "106.98")
