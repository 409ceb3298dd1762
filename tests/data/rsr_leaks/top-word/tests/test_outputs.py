import unittest


class TopWord(unittest.TestCase):
    def setUp(self):
        with open("/app/top.txt") as fh:
            self.fields = fh.read().split()

    def test_word(self):
        self.assertEqual(len(self.fields), 2, "expected WORD COUNT")
        self.assertEqual(self.fields[0], "lantern")

    def test_count(self):
        self.assertEqual(int(self.fields[1]), 13)
