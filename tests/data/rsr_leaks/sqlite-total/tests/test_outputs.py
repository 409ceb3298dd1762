import sqlite3
import unittest


class Revenue(unittest.TestCase):
    def test_revenue(self):
        with open("/app/de_revenue.txt") as fh:
            self.assertAlmostEqual(float(fh.read()), 2317.75, places=2)

    def test_top_customer(self):
        with open("/app/top_de.txt") as fh:
            self.assertEqual(fh.read().strip(), "Brandt")

    def test_database_unchanged(self):
        con = sqlite3.connect("/app/shop.db")
        n = con.execute("SELECT COUNT(*) FROM orders WHERE total > 0").fetchone()[0]
        self.assertEqual(n, 60)
