"""The time a question asks about: ``on 8 May, 2023``, ``in July 2023``, ``two weeks before August 11,
2023``, ``last May``, ``3 days ago`` as a window of UTC time, or None.

Absolute dates name a day, a month (``early``/``late``/``the first half of`` narrow it), a season or a
year; a date ``N days/weeks/months before`` or ``after`` another is moved by that much; the rest is
read against ``now`` (the recall's ``as_of``): ``yesterday``, ``last week``/``month``/``year``/
``weekend``, ``N units ago``, and a month without a year is its latest occurrence up to now. English
only; the first expression found wins. Windows are half-open: ``[start, end)``.
"""

from __future__ import annotations

import calendar
import re
from datetime import UTC, datetime, timedelta

__all__ = ["Window", "query_window"]

Window = tuple[datetime, datetime]

_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_MONTHS["sept"] = 9
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
            "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "few": 3, "couple of": 2}  # fmt: skip
_COUNT = r"(?P<count>\d{1,3}|" + "|".join(sorted(_NUMBERS, key=len, reverse=True)) + r")"
_UNIT = r"(?P<unit>day|week|weekend|month|year)s?"
_YEAR = r"(?P<year>(?:19|20)\d\d)\b"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_PART = r"(?:(?P<part>early|late|beginning of|start of|end of|mid|middle of|first half of|second half of)\s+)?"
_SEASONS = {"spring": (3, 3), "summer": (6, 3), "autumn": (9, 3), "fall": (9, 3), "winter": (12, 3)}

_DAY_DATES = (
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}", re.I),
    re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}", re.I),
)
_MONTH_DATE = re.compile(rf"\b{_PART}(?:the\s+)?{_MONTH},?\s+(?:of\s+)?{_YEAR}", re.I)
_SEASON_DATE = re.compile(rf"\b(?P<season>spring|summer|autumn|fall|winter)\s+(?:of\s+)?{_YEAR}", re.I)
_YEAR_DATE = re.compile(rf"\b(?:in|during|of|since|for)\s+{_YEAR}", re.I)
_SHIFT = re.compile(rf"\b(?:{_COUNT}\s+)?(?:the\s+)?{_UNIT}\s+(?P<way>before|after|prior to)\s+", re.I)
_AGO = re.compile(rf"\b{_COUNT}\s+{_UNIT}\s+ago\b", re.I)
_LAST = re.compile(r"\b(?P<which>last|past|previous|this)\s+(?P<unit>week|weekend|month|year)\b", re.I)
_DAYWORD = re.compile(r"\b(?P<word>yesterday|today)\b", re.I)
_BARE_MONTH = re.compile(rf"\b(?P<prep>last|in|during|since|this|early|late)\s+{_MONTH}(?![\w-])", re.I)


def query_window(text: str, now: datetime) -> Window | None:
    """Given a question and the time it is asked at, return the window of time it names, or None."""
    now = now.astimezone(UTC)
    for find in (_shifted, _absolute, _relative):
        found = find(text, now)
        if found is not None:
            return found
    return None


def _absolute(text: str, now: datetime) -> Window | None:
    """The first day, month, season or year named with its year."""
    found: list[tuple[int, Window]] = []
    for pattern in _DAY_DATES:
        if (m := pattern.search(text)) is not None and (day := _day(m)) is not None:
            found.append((m.start(), (day, day + timedelta(days=1))))
    if (m := _MONTH_DATE.search(text)) is not None:
        found.append((m.start(), _month_part(int(m["year"]), _MONTHS[m["month"].lower()], m["part"])))
    if (m := _SEASON_DATE.search(text)) is not None:
        first, months = _SEASONS[m["season"].lower()]
        start = datetime(int(m["year"]), first, 1, tzinfo=UTC)
        found.append((m.start(), (start, _add_months(start, months))))
    if (m := _YEAR_DATE.search(text)) is not None:
        year = int(m["year"])
        found.append((m.start(), (datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC))))
    # a day date also holds a month date ("8 May, 2023" holds "May, 2023"): at one place, the narrowest wins
    return min(found, key=lambda item: (item[0], item[1][1] - item[1][0]))[1] if found else None


def _shifted(text: str, now: datetime) -> Window | None:
    """``N units before/after <absolute date>``: the date moved by that much, one unit wide."""
    for m in _SHIFT.finditer(text):
        anchor = _absolute(text[m.end() :], now)
        if anchor is None:
            continue
        count = _count(m["count"]) if m["count"] else 1
        unit = _unit(m["unit"])
        if m["way"].lower() == "after":
            start = _shift(anchor[1], unit, count - 1)
            return start, _shift(start, unit, 1)
        end = _shift(anchor[0], unit, -(count - 1))
        return _shift(end, unit, -1), end
    return None


def _relative(text: str, now: datetime) -> Window | None:
    """Expressions read against ``now``."""
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if (m := _DAYWORD.search(text)) is not None:
        start = today - timedelta(days=1 if m["word"].lower() == "yesterday" else 0)
        return start, start + timedelta(days=1)
    if (m := _AGO.search(text)) is not None:
        unit = _unit(m["unit"])
        start = _shift(today, unit, -_count(m["count"]))
        return _shift(start, unit, -1) if unit != "days" else start, _shift(start, unit, 1)
    if (m := _LAST.search(text)) is not None:
        unit = _unit(m["unit"])
        current = {"weeks": today - timedelta(days=today.weekday()), "months": today.replace(day=1),
                   "years": today.replace(month=1, day=1)}[unit]  # fmt: skip
        if m["which"].lower() == "this":
            return current, _shift(current, unit, 1)
        return _shift(current, unit, -1), current
    if (m := _BARE_MONTH.search(text)) is not None:
        month = _MONTHS[m["month"].lower()]
        if m["month"].lower() == "may" and m["prep"].lower() not in ("in", "last", "during", "since"):
            return None  # "this may" is a verb more often than a month
        year = now.year if month < now.month or (month == now.month and m["prep"].lower() != "last") else now.year - 1
        return _month_part(year, month, m["prep"] if m["prep"].lower() in ("early", "late") else None)
    return None


def _day(m: re.Match[str]) -> datetime | None:
    try:
        return datetime(int(m["year"]), _MONTHS[m["month"].lower()], int(m["day"]), tzinfo=UTC)
    except ValueError:  # 31 June
        return None


def _month_part(year: int, month: int, part: str | None) -> Window:
    start = datetime(year, month, 1, tzinfo=UTC)
    end = _add_months(start, 1)
    days = (end - start).days
    spans = {"early": (0, 10), "beginning of": (0, 10), "start of": (0, 10), "mid": (10, 20),
             "middle of": (10, 20), "late": (20, days), "end of": (20, days), "first half of": (0, 15),
             "second half of": (15, days)}  # fmt: skip
    first, last = spans.get((part or "").lower(), (0, days))
    return start + timedelta(days=first), start + timedelta(days=last)


def _count(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBERS[word.lower()]


def _unit(word: str) -> str:
    return {"day": "days", "week": "weeks", "weekend": "weeks", "month": "months", "year": "years"}[word.lower()]


def _shift(moment: datetime, unit: str, count: int) -> datetime:
    if unit == "days":
        return moment + timedelta(days=count)
    if unit == "weeks":
        return moment + timedelta(weeks=count)
    return _add_months(moment, count * (12 if unit == "years" else 1))


def _add_months(moment: datetime, months: int) -> datetime:
    index = moment.year * 12 + moment.month - 1 + months
    year, month = divmod(index, 12)
    day = min(moment.day, calendar.monthrange(year, month + 1)[1])
    return moment.replace(year=year, month=month + 1, day=day)
