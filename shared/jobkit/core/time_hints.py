"""What an error says of a time no clock could have made: how far ahead it is,
and what it looks like instead (milliseconds, a MediaWiki timestamp)."""

from __future__ import annotations

from datetime import UTC, datetime

#: Epoch seconds above this (the year 5138) are almost surely milliseconds.
MILLISECONDS_FROM = 1e11


def ahead(value: float, now: float) -> str:
    seconds = value - now
    return f"{seconds:,.0f} s" if seconds < 86400 * 2 else f"{seconds / 86400:,.0f} days"


def milliseconds_hint(value: float) -> str:
    mediawiki = mediawiki_timestamp(value)
    if mediawiki is not None:
        when = mediawiki.strftime("%Y-%m-%dT%H:%M:%SZ")
        return (
            f" (it looks like a MediaWiki timestamp, YYYYMMDDHHMMSS, for {when}: the wire format"
            f" counts epoch seconds, {mediawiki.timestamp():.0f}; in PHP, wfTimestamp( TS_UNIX, $ts ))"
        )
    if value >= MILLISECONDS_FROM:
        return " (it looks like milliseconds: the wire format counts epoch seconds)"
    return ": is the sending host's clock right?"


def mediawiki_timestamp(value: float) -> datetime | None:
    """``value`` read as MediaWiki's TS_MW (``20261127024500``, UTC), if it is one."""
    if not float(value).is_integer() or not 1e13 <= value < 1e14:
        return None
    try:
        return datetime.strptime(f"{int(value)}", "%Y%m%d%H%M%S").replace(tzinfo=UTC)
    except ValueError:
        return None
