"""The two errors a user can get before anything is launched. Both exit 2."""


class RlaunchError(Exception):
    """Base: anything rlaunch reports as one line and exit code 2."""

    exit_code = 2


class ConfigError(RlaunchError):
    """A config value is wrong: names the key, the value and what is allowed."""

    def __init__(self, key: str, value, allowed: str, source: str = ""):
        self.key, self.value, self.allowed, self.source = key, value, allowed, source
        where = f" (from {source})" if source else ""
        super().__init__(f"config: {key}={value!r}{where}: {allowed}")


class CheckError(RlaunchError):
    """A rendered artifact or a topology failed a check."""

    def __init__(self, check: str, message: str):
        self.check = check
        super().__init__(f"check {check}: {message}")


class MissingPrerequisite(RlaunchError):
    """Launch needs something this machine does not have (a credential, a cluster, a tool)."""

    exit_code = 3

    def __init__(self, what: str, how: str):
        self.what, self.how = what, how
        super().__init__(f"missing {what}: {how}")
