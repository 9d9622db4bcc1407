"""How long EKS supports each Kubernetes version: a dated table and the warning it gives.

Source: the Amazon EKS User Guide, "Understand the Kubernetes version lifecycle on EKS", section
"Amazon EKS Kubernetes release calendar"
(https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html#kubernetes-release-calendar),
as read on 2026-11-30. A version gets 14 months of standard support from its EKS release, then 12
months of extended support (at extra cost); 1.22 ended before extended support existed.

Update `CALENDAR` (and `AS_OF`) when EKS adds a version; a version missing from it gets no
warning, only a note that the table does not know it. Pure: `today` is always passed in.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

AS_OF = date(2026, 11, 30)
SOURCE = "https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html#kubernetes-release-calendar"


@dataclass(frozen=True)
class Support:
    released: date  # Amazon EKS release
    standard_until: date  # end of standard support
    extended_until: date  # end of extended support (= standard_until when there was none)


CALENDAR: dict[str, Support] = {
    "1.22": Support(date(2022, 4, 4), date(2023, 6, 4), date(2023, 6, 4)),
    "1.23": Support(date(2022, 8, 11), date(2023, 10, 11), date(2024, 10, 11)),
    "1.24": Support(date(2022, 11, 15), date(2024, 1, 31), date(2025, 1, 31)),
    "1.25": Support(date(2023, 2, 21), date(2024, 5, 1), date(2025, 5, 1)),
    "1.26": Support(date(2023, 4, 11), date(2024, 6, 11), date(2025, 6, 11)),
    "1.27": Support(date(2023, 5, 24), date(2024, 7, 24), date(2025, 7, 24)),
    "1.28": Support(date(2023, 9, 26), date(2024, 11, 26), date(2025, 11, 26)),
    "1.29": Support(date(2024, 1, 23), date(2025, 3, 23), date(2026, 3, 23)),
    "1.30": Support(date(2024, 5, 23), date(2025, 7, 23), date(2026, 7, 23)),
    "1.31": Support(date(2024, 9, 26), date(2025, 11, 26), date(2026, 11, 26)),
    "1.32": Support(date(2025, 1, 23), date(2026, 3, 23), date(2027, 3, 23)),
    "1.33": Support(date(2025, 5, 29), date(2026, 7, 29), date(2027, 7, 29)),
    "1.34": Support(date(2025, 10, 2), date(2026, 12, 2), date(2027, 12, 2)),
    "1.35": Support(date(2026, 1, 27), date(2027, 3, 27), date(2028, 3, 27)),
}


def newest_in_standard_support(today: date) -> str:
    """The newest version of the table still in standard support on `today`."""
    current = [v for v, s in CALENDAR.items() if s.released <= today < s.standard_until]
    return max(current or CALENDAR, key=lambda version: tuple(int(p) for p in version.split(".")))


def support_warning(version: str, today: date) -> str | None:
    """One line when `version` is past EKS's standard or extended support on `today`, else None."""
    support = CALENDAR.get(version)
    if support is None or today < support.standard_until:
        return None
    newest = newest_in_standard_support(today)
    if today >= support.extended_until:
        return (f"Kubernetes {version} is past the end of EKS support ({support.extended_until.isoformat()}): "
                f"EKS upgrades such clusters itself; build for {newest} (EKS release calendar as of {AS_OF})")
    return (f"Kubernetes {version} is past the end of EKS standard support ({support.standard_until.isoformat()}); "
            f"extended support, at extra cost, ends {support.extended_until.isoformat()}: plan the move to {newest} "
            f"(EKS release calendar as of {AS_OF})")
