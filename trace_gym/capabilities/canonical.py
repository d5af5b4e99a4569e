"""Canonical forms behind the matchers that compare values the way a person means them.

* :func:`canonical_phone` — a phone number in E.164 (``"+1 (415) 555-0134"`` → ``"+14155550134"``);
  numbers written without a country code are read as North American.
* :func:`timestamp_of` — a POSIX timestamp from a number or an ISO 8601 date-time (UTC when
  no offset is given).
* :func:`text_similarity` — ROUGE-L F between two texts, the measure ToolSandbox scores
  message and reminder contents with (:func:`trace_gym.toolsandbox.similarity.rouge_l`).

Each returns ``None`` (or 0.0) for a value it cannot read; none of them raises.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from functools import lru_cache
from typing import Any

__all__ = ["canonical_phone", "timestamp_of", "text_similarity", "TIME_TOLERANCE_S", "SIMILAR_MIN"]

TIME_TOLERANCE_S = 60.0  # ``time_near``: timestamps within a minute are the same moment
SIMILAR_MIN = 0.5  # ``similar_to``: ROUGE-L F at least this

_DIGITS = re.compile(r"\d")
_NANP_E164 = re.compile(r"\+1[2-9][0-9]{9}")


def canonical_phone(value: Any) -> str | None:
    """``value`` as an E.164 number, or ``None`` when it is not a phone number."""
    if not isinstance(value, str) or not _DIGITS.search(value) or len(value) > 64:
        return None
    if _NANP_E164.fullmatch(value):  # already E.164 (what phonenumbers gives back unchanged)
        return str(value)
    return _e164(str(value))


@lru_cache(maxsize=1024)
def _e164(value: str) -> str | None:
    import phonenumbers

    text = value.strip()
    try:
        parsed = phonenumbers.parse(text, None if text.startswith("+") else "US")
    except phonenumbers.NumberParseException:
        return None
    return phonenumbers.format_number(parsed, phonenumbers.PhoneNumberFormat.E164)


def timestamp_of(value: Any) -> float | None:
    """A POSIX timestamp from a finite number or an ISO 8601 text; ``None`` otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str) and len(value) <= 64:
        text = value.strip()
        try:
            return float(text) if math.isfinite(float(text)) else None
        except ValueError:
            pass
        try:
            moment = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=_dt.UTC)
        return moment.timestamp()
    return None


def text_similarity(target: Any, prediction: Any) -> float:
    """ROUGE-L F of two texts (0.0 unless both are text)."""
    if not isinstance(target, str) or not isinstance(prediction, str):
        return 0.0
    if target.strip().lower() == prediction.strip().lower():
        return 1.0
    from trace_gym.toolsandbox.similarity import rouge_l

    return float(rouge_l(target[:2000], prediction[:2000]))
