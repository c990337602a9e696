"""The run-wide stop, shared by every long command: see ``hercules.interrupt``.

Kept under this name for the debugging benchmark's modules, which import it from here."""

from hercules.interrupt import (  # noqa: F401 -- re-exported: one STOP for the whole process
    STOP,
    Interrupted,
    abandoned,
    check,
    exit_status,
    exit_stopped,
    kill_groups,
    map_until_stopped,
    register,
    request_stop,
    stop_on_signals,
    unregister,
)
