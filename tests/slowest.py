"""The suite's 30 slowest tests over every pytest pass of scripts/test (their JUnit XML files), and
each pass's count and seconds: where a CI run's minutes went, in one list.

Usage: python tests/slowest.py RESULT.xml...
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

TOP = 30


def read(path: Path) -> tuple[list[tuple[float, str]], dict[str, float]]:
    """(seconds, test id) of every test case in one JUnit file, and its totals."""
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    cases = [(float(case.get("time") or 0), f"{case.get('classname', '')}::{case.get('name', '')}")
             for suite in suites for case in suite.iter("testcase")]
    totals = {key: sum(float(suite.get(key) or 0) for suite in suites)
              for key in ("tests", "failures", "errors", "skipped", "time")}
    return cases, totals


def main(argv: list[str]) -> int:
    everything: list[tuple[float, str]] = []
    for name in argv:
        path = Path(name)
        if not path.is_file():
            continue  # a pass that did not run
        cases, totals = read(path)
        everything += cases
        print(f"{path.stem}: {int(totals['tests'])} tests ({int(totals['failures'])} failed, "
              f"{int(totals['errors'])} errors, {int(totals['skipped'])} skipped) in {totals['time']:.0f} s, "
              f"{sum(s for s, _ in cases):.0f} s of test time")
    for seconds, test in sorted(everything, reverse=True)[:TOP]:
        print(f"{seconds:8.1f} s  {test}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
