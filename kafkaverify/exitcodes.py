"""Exit codes shared by every command (a contract other tools build on)."""
VALID = 0        # no violation / valid history / trace ran clean
VIOLATION = 1    # a violation or anomaly was found
UNKNOWN = 2      # bound or time limit hit, nothing examined, incomplete
USAGE = 3        # usage or input error: bad option, bad file


class InputError(Exception):
    """A user mistake (bad file, impossible option). Printed without a traceback, exit 3."""
