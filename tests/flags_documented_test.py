#!/usr/bin/env python3
"""Every kvsessiond flag is in docs/operations.md's flag tables.

Operators look flags up there; a flag added to service/kvsessiond_main.cc
without a row is invisible to them. Reads `kvsessiond --helpfull` (the
flags the binary really has, from the file that defines them) and checks
that each appears as `--name` (dashes, as on the command line) in the doc.
"""
import os
import re
import subprocess
import unittest

BINARY = os.environ.get("KVS_BINARY_DIR", "build")
SOURCE = os.environ.get("KVS_SOURCE_DIR", ".")


class FlagsDocumentedTest(unittest.TestCase):
    def test_every_kvsessiond_flag_has_a_row_in_the_operations_doc(self):
        out = subprocess.run([os.path.join(BINARY, "bin", "kvsessiond"), "--helpfull"],
                             capture_output=True, text=True, timeout=60)
        text = out.stdout + out.stderr
        start = text.find("kvsessiond_main.cc:")
        self.assertGreaterEqual(start, 0, "kvsessiond --helpfull lists no flags of kvsessiond_main.cc")
        section = text[start:]
        # The next file's flags end the section.
        following = re.search(r"\n  Flags from ", section)
        if following:
            section = section[:following.start()]
        flags = sorted(set(m.replace("_", "-") for m in re.findall(r"^    --([a-z0-9_]+)", section, re.M)))
        self.assertGreater(len(flags), 30, "fewer flags than kvsessiond has: the parse broke")
        with open(os.path.join(SOURCE, "docs", "operations.md"), encoding="utf-8") as f:
            doc = f.read()
        missing = [f for f in flags if "`--%s`" % f not in doc]
        self.assertEqual(missing, [], "flags without a row in docs/operations.md")


if __name__ == "__main__":
    unittest.main()
