"""How ``jobkit ui`` was asked to run: what the command line decides about the app."""

from __future__ import annotations

from dataclasses import dataclass

#: How often the overview refreshes itself, by default (as ``jobkit top``'s frames).
DEFAULT_INTERVAL_S = 10.0
#: The window of the overview's rates and pickup delays (as ``jobkit top``'s default).
DEFAULT_WINDOW_S = 300


@dataclass(frozen=True)
class UiSettings:
    """The app's switches.

    Attributes:
        allow_actions: whether redrive, delete, purge and cancel exist at all; off,
            no button is rendered and every POST is refused.
        token: the access token every request must carry; ``None`` only when
            serving on a loopback address.
        loopback: whether the server listens on a loopback address only (the
            ``Host`` header is then checked, against DNS rebinding).
        interval_s: seconds between the overview's refreshes.
        window_s: the window of its rates and pickup delays.
        dead_letter_limit: dead letters listed on a type's page.
    """

    allow_actions: bool = False
    token: str | None = None
    loopback: bool = True
    interval_s: float = DEFAULT_INTERVAL_S
    window_s: int = DEFAULT_WINDOW_S
    dead_letter_limit: int = 200
