"""Time expressions of a question resolved against its CRAG `query_time` (spec/pruningrag.md §6.2 step 4).

CRAG stamps each question with the moment it was asked, "mm/dd/yyyy, hh:mm:ss PT"; relative words are
resolved against that date (in PT, as the official code does), never against the machine's clock:
explicit dates (2024-03-05, 03/05/2024, March 5 2024, 5 March), today / yesterday / the day before
yesterday / last night, N days ago, the past N days, this or last week (calendar weeks, Monday to Sunday),
month, year, weekday names, month names (the latest such month not after the query) and bare years.
Expressions are matched longest first, so "March 5, 2024" is one day, not also a month and a year.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from hoprag.data.crag import parse_query_time  # the loader checks every query_time with it

MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december")
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTH = r"(?P<month>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d{2})"
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
            "eight": 8, "nine": 9, "ten": 10, "fourteen": 14, "thirty": 30}
_COUNT = r"(?P<n>\d+|" + "|".join(_NUMBERS) + ")"
_LAST = r"(?:last|past|previous|prior)"


@dataclass(frozen=True)
class Period:
    """A closed range of days, with the words of the question it was read from."""

    start: date
    end: date
    label: str

    @property
    def single_day(self) -> bool:
        return self.start == self.end

    def contains(self, day: date) -> bool:
        return self.start <= day <= self.end

    def years(self) -> tuple[int, ...]:
        return tuple(range(self.start.year, self.end.year + 1))

    def api_dates(self) -> list[str]:
        """The fewest date strings of the sports endpoints ("YYYY-MM-DD", "YYYY-MM" or "YYYY") that
        cover the period; the caller keeps the games inside it."""
        if self.single_day:
            return [self.start.isoformat()]
        if (self.start.year, self.start.month) == (self.end.year, self.end.month):
            return [self.start.strftime("%Y-%m")]
        return [str(y) for y in self.years()]


def resolve_periods(question: str, query_time: str | datetime | date) -> list[Period]:
    """Every time expression of `question` as a `Period`, in the order they appear, without repeats."""
    today = _as_date(query_time)
    text = question.lower()
    found: list[tuple[int, Period]] = []
    taken: list[tuple[int, int]] = []
    for pattern, resolve in _RULES:
        for match in pattern.finditer(text):
            if any(match.start() < end and start < match.end() for start, end in taken):
                continue
            period = resolve(match, today)
            if period is not None:
                found.append((match.start(), Period(period[0], period[1], match.group(0).strip())))
                taken.append(match.span())
    periods: list[Period] = []
    for _, period in sorted(found, key=lambda item: item[0]):
        if all((p.start, p.end) != (period.start, period.end) for p in periods):
            periods.append(period)
    return periods


def _as_date(query_time: str | datetime | date) -> date:
    if isinstance(query_time, str):
        return parse_query_time(query_time).date()
    return query_time.date() if isinstance(query_time, datetime) else query_time


def _month_number(name: str) -> int:
    return next(i for i, m in enumerate(MONTHS, 1) if m.startswith(name[:3]))


def _day(year: int, month: int, day: int) -> tuple[date, date] | None:
    try:
        d = date(year, month, day)
    except ValueError:
        return None
    return d, d


def _month(year: int, month: int) -> tuple[date, date]:
    return date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1])


def _latest_month(month: int, today: date, strictly_before: bool = False) -> tuple[date, date]:
    """The latest `month` not after today's month (before it, for "last March" asked in March)."""
    late = month > today.month or (strictly_before and month == today.month)
    return _month(today.year - late, month)


def _week_start(day: date) -> date:
    return day - timedelta(days=day.weekday())


def _count(match: re.Match) -> int:
    n = match.group("n")
    return int(n) if n.isdigit() else _NUMBERS[n]


def _numeric(m: re.Match, today: date):
    return _day(int(m.group("year")), int(m.group("m")), int(m.group("day")))


def _month_day(m: re.Match, today: date):
    month, day = _month_number(m.group("month")), int(m.group("day"))
    if m.group("year"):
        return _day(int(m.group("year")), month, day)
    late = (month, day) > (today.month, today.day)
    return _day(today.year - late, month, day)


def _month_year(m: re.Match, today: date):
    return _month(int(m.group("year")), _month_number(m.group("month")))


def _bare_month(m: re.Match, today: date):
    return _latest_month(_month_number(m.group("month")), today, strictly_before=m.group("which") == "last")


def _this_month_name(m: re.Match, today: date):
    return _month(today.year, _month_number(m.group("month")))


def _weekday(m: re.Match, today: date):
    back = (today.weekday() - WEEKDAYS.index(m.group("weekday"))) % 7
    if back == 0 and m.group("which") == "last":
        back = 7
    d = today - timedelta(days=back)
    return d, d


def _days_ago(m: re.Match, today: date):
    d = today - timedelta(days=_count(m))
    return d, d


def _past_days(m: re.Match, today: date):
    return today - timedelta(days=_count(m) - 1), today


def _past_weeks(m: re.Match, today: date):
    return today - timedelta(weeks=_count(m)) + timedelta(days=1), today


def _offset(days: int):
    return lambda m, today: (today - timedelta(days=days),) * 2


def _last_week(m: re.Match, today: date):
    start = _week_start(today) - timedelta(days=7)
    return start, start + timedelta(days=6)


def _this_week(m: re.Match, today: date):
    return _week_start(today), today


def _last_month(m: re.Match, today: date):
    first = today.replace(day=1) - timedelta(days=1)
    return _month(first.year, first.month)


def _this_month(m: re.Match, today: date):
    return today.replace(day=1), today


def _last_year(m: re.Match, today: date):
    return date(today.year - 1, 1, 1), date(today.year - 1, 12, 31)


def _this_year(m: re.Match, today: date):
    return date(today.year, 1, 1), today


def _year(m: re.Match, today: date):
    year = int(m.group("year"))
    return date(year, 1, 1), date(year, 12, 31)


_WEEKDAY = r"(?P<weekday>" + "|".join(WEEKDAYS) + ")"
_FULL_MONTH = r"(?P<month>" + "|".join(m for m in MONTHS if m != "may") + ")"
_RULES = [(re.compile(p), f) for p, f in [
    (r"\b" + _YEAR + r"-(?P<m>\d{1,2})-(?P<day>\d{1,2})\b", _numeric),
    (r"\b(?P<m>\d{1,2})/(?P<day>\d{1,2})/" + _YEAR + r"\b", _numeric),
    (r"\b" + _MONTH + r"\.?\s+" + _DAY + r"\b(?:,?\s+" + _YEAR + r"\b)?", _month_day),
    (r"\b" + _DAY + r"\s+(?:of\s+)?" + _MONTH + r"\b\.?(?:,?\s+" + _YEAR + r"\b)?", _month_day),
    (r"\b" + _MONTH + r"\.?,?\s+(?:of\s+)?" + _YEAR + r"\b", _month_year),
    (r"\bthe day before yesterday\b", _offset(2)),
    (r"\b(?:yesterday|last night)\b", _offset(1)),
    (r"\b(?:today|tonight|this morning|this afternoon|this evening)\b", _offset(0)),
    (r"\b" + _COUNT + r"\s+days?\s+ago\b", _days_ago),
    (r"\b" + _LAST + r"\s+" + _COUNT + r"\s+(?:trading\s+)?days\b", _past_days),
    (r"\b" + _LAST + r"\s+" + _COUNT + r"\s+weeks\b", _past_weeks),
    (r"\b" + _LAST + r"\s+week\b", _last_week),
    (r"\bthis\s+week\b", _this_week),
    (r"\b" + _LAST + r"\s+month\b", _last_month),
    (r"\bthis\s+month\b", _this_month),
    (r"\b" + _LAST + r"\s+year\b", _last_year),
    (r"\bthis\s+year\b", _this_year),
    (r"\b(?P<which>last|on|this|past)?\s*" + _WEEKDAY + r"\b", _weekday),
    (r"\bthis\s+" + _MONTH + r"\b", _this_month_name),
    # "may" is a month only after a preposition ("in May"), never the verb ("may I ask").
    (r"\b(?:(?P<which>last|in|of|during|since|by|until|through)\s+)?" + _FULL_MONTH + r"\b", _bare_month),
    (r"\b(?P<which>last|in|of|during|since|by|until|through)\s+(?P<month>may)\b", _bare_month),
    (r"\b" + _YEAR + r"\b", _year),
]]
