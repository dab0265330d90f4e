"""rlaunch.firecli: the one way rlaunch's command lines run (fire); rlaunch.cmdline: the standard-library
tools' (argparse, one-line usage errors)."""

from __future__ import annotations

import pytest

from rlaunch import cmdline, firecli
from rlaunch.errors import ConfigError


class Commands:
    """A group of commands."""

    def code(self, n):
        return int(n)

    def nothing(self):
        print("did it")

    def bad(self, value):
        raise ConfigError("KIND", str(value), "one of a, b")

    def text(self):
        return "shown as fire shows it"


def test_an_int_is_the_exit_code_and_is_never_printed(capsys):
    assert firecli.run(Commands, "t", "t", ["code", "3"]) == 3
    assert firecli.run(Commands, "t", "t", ["nothing"]) == 0
    assert capsys.readouterr().out == "did it\n"


def test_an_rlaunch_error_is_one_line_with_the_prefix_and_its_exit_code(capsys):
    assert firecli.run(Commands, "t", "prefix", ["bad", "x"]) == 2
    assert capsys.readouterr().err == "prefix: config: KIND='x': one of a, b\n"


def test_other_results_and_a_bare_group_show_as_fire_shows_them(capsys):
    assert firecli.run(Commands, "t", "t", ["text"]) == 0
    assert capsys.readouterr().out == "shown as fire shows it\n"
    assert firecli.run(Commands, "t", "t", []) == 0
    assert "A group of commands." in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "line"), [
    ([], "tool: the following arguments are required: COMMAND\n"),
    (["frob"], "tool: argument COMMAND: invalid choice: 'frob' (choose from 'check')\n"),
    (["check"], "tool check: the following arguments are required: --run-dir\n"),
    (["check", "--run-dir", "x", "--nope"], "tool: unrecognized arguments: --nope\n"),
])
def test_a_tool_s_usage_error_is_one_line_and_exit_2(argv, line, capsys):
    parser = cmdline.parser("tool", "A tool.")
    parser.add_subparsers(dest="command", required=True, metavar="COMMAND").add_parser("check").add_argument(
        "--run-dir", required=True)
    with pytest.raises(SystemExit) as done:
        parser.parse_args(argv)
    assert done.value.code == 2
    assert capsys.readouterr().err == line
    assert parser.parse_args(["check", "--run-dir", "x"]).run_dir == "x"
