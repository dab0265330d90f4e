"""rlaunch's exit codes, the one list every command, the rendered job and the templates use, and the
errors a user gets before anything is launched: RlaunchError and its ConfigError and CheckError exit
EXIT_USAGE, MissingPrerequisite exits EXIT_MISSING; and UsageError, the job's tools' bad command line
(exit EXIT_USAGE). Standard library only: pins and knobs import it
on a bare python3."""

EXIT_FAILED = 1  # it ran, and what it checked failed (a run, a verification, a report)
EXIT_USAGE = 2  # bad input: nothing launched, written or overwritten
EXIT_MISSING = 3  # a missing prerequisite: a credential, a cluster, a tool
EXIT_NODE_LOST = 75  # a node was lost mid-run (EX_TEMPFAIL): the run can continue (RESUME=1, a retry)


class RlaunchError(Exception):
    """Base: anything rlaunch reports as one line and exit code EXIT_USAGE."""

    exit_code = EXIT_USAGE


class ConfigError(RlaunchError):
    """A config value is wrong: names the key, the value and what is allowed."""

    def __init__(self, key: str, value: object, allowed: str, source: str = ""):
        self.key, self.value, self.allowed, self.source = key, value, allowed, source
        where = f" (from {source})" if source else ""
        super().__init__(f"config: {key}={value!r}{where}: {allowed}")


class CheckError(RlaunchError):
    """A rendered artifact or a topology failed a check."""

    def __init__(self, check: str, message: str):
        self.check = check
        super().__init__(f"check {check}: {message}")


class UsageError(Exception):
    """Bad command-line input to one of the job's tools (preflight, postflight, layouts' --path):
    one line on stderr and exit EXIT_USAGE."""


class MissingPrerequisite(RlaunchError):
    """Launch needs something this machine does not have (a credential, a cluster, a tool)."""

    exit_code = EXIT_MISSING

    def __init__(self, what: str, how: str):
        self.what, self.how = what, how
        super().__init__(f"missing {what}: {how}")
