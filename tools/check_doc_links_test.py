#!/usr/bin/env python3
"""tools/check-doc-links on small repositories made here: it passes when
every link and quoted section resolves, and fails, naming the file and
line, when one does not. Each case copies the checker into a fresh git
work tree (it checks the tree it sits in) and runs it there."""
import os
import shutil
import subprocess
import tempfile
import textwrap
import unittest

CHECKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check-doc-links")

PERFORMANCE = textwrap.dedent("""\
    # Performance

    ## Restore

    **Cold restores read past the page cache.** Direct reads.

    ### The suite (Zen 4, sixty-ninth sitting)

    ## Restore

    ```
    # not a heading
    ```
    """)


class CheckDocLinksTest(unittest.TestCase):
    def run_checker(self, files):
        root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, root)
        os.makedirs(os.path.join(root, "tools"))
        shutil.copy(CHECKER, os.path.join(root, "tools", "check-doc-links"))
        for path, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
            with open(os.path.join(root, path), "w", encoding="utf-8") as f:
                f.write(text)
        subprocess.run(["git", "init", "-q", root], check=True)
        subprocess.run(["git", "-C", root, "add", "-A"], check=True)
        return subprocess.run([os.path.join(root, "tools", "check-doc-links")], capture_output=True, text=True)

    def test_links_to_files_headings_and_repeated_headings_pass(self):
        result = self.run_checker({
            "docs/perf/zen4.md": PERFORMANCE,
            "README.md": "[a](docs/perf/zen4.md#restore), [b](docs/perf/zen4.md#restore-1),\n"
                         "[c](docs/perf/zen4.md#the-suite-zen-4-sixty-ninth-sitting), [d](docs/perf/),\n"
                         "[a link whose text runs\nacross lines](docs/perf/zen4.md), [site](https://example.com/x)\n",
        })
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)

    def test_a_link_to_a_missing_anchor_fails_naming_its_line(self):
        result = self.run_checker({
            "docs/perf/zen4.md": PERFORMANCE,
            "README.md": "intro\n[a](docs/perf/zen4.md#restore-2)\n",
        })
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("README.md:2: no heading in docs/perf/zen4.md has the anchor #restore-2", result.stdout)

    def test_a_link_to_a_missing_file_fails(self):
        result = self.run_checker({"docs/a.md": "# A\n\nsee [b](b.md)\n"})
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("docs/a.md:3: link to missing file b.md", result.stdout)

    def test_headings_and_links_inside_code_are_not_checked(self):
        result = self.run_checker({
            "docs/perf/zen4.md": PERFORMANCE,
            "docs/b.md": "# B\n\n```\nauto f = [&](int x) { return x; };\n```\n\nand `[x](y)` inline\n",
            "README.md": "[no](docs/perf/zen4.md#not-a-heading)\n",
        })
        self.assertNotEqual(result.returncode, 0)
        self.assertNotIn("docs/b.md", result.stdout)
        self.assertIn("README.md:1: no heading in docs/perf/zen4.md has the anchor #not-a-heading", result.stdout)

    def test_a_section_quoted_across_comment_lines_resolves(self):
        result = self.run_checker({
            "docs/perf/zen4.md": PERFORMANCE,
            "cache/read.cc": "// Read past the cache (docs/perf/zen4.md, \"Cold restores\n// read past\").\n"
                             "// Also docs/perf/zen4.md (\"The suite\") and (docs/perf/zen4.md).\n",
        })
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)

    def test_a_quoted_section_no_heading_starts_with_fails(self):
        result = self.run_checker({
            "docs/perf/zen4.md": PERFORMANCE,
            "kernels/tile.h": "// one\n// measured (docs/perf/zen4.md, \"Warm restores\").\n",
        })
        self.assertNotEqual(result.returncode, 0)
        self.assertIn('kernels/tile.h:2: no heading of docs/perf/zen4.md starts with "warm restores"', result.stdout)

    def test_a_missing_documentation_file_named_in_code_fails(self):
        result = self.run_checker({"service/main.cc": "// see docs/gone.md, \"Flags\"\n"})
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("service/main.cc:1: names a missing file docs/gone.md", result.stdout)


if __name__ == "__main__":
    unittest.main()
