"""Fair share, from `sshare`: each account's standing against its shares. Under Fair Tree
(Slurm's default since 19.05, and this bundle's) Slurm ranks users, so an account row carries
its Level FS and no FairShare factor; under the classic algorithm it carries the factor. The
text form reads alike in every version the bundle runs; --json is missing from 22.05."""

from __future__ import annotations

from typing import Any

# What any user may ask: without -a, sshare lists every account and only the asker's own user
# rows. Account names are the operators' (sacctmgr), never a cluster user's, so `|` cannot be
# forged into a row.
SHARES_COMMAND = ["sshare", "-n", "-P", "-o", "Account,User,NormShares,FairShare,LevelFS"]


def slurm_shares(output: str) -> list[dict[str, Any]]:
    """One record per account row of SHARES_COMMAND's answer: account, fairshare (the classic
    factor, 0 to 1) and level_fs (Fair Tree: shares over usage among its siblings; above 1
    under-served; inf with no usage); None where Slurm printed none, and both None under
    priority/basic (22.05's default), which computes no fair share and prints no normalized
    shares, only zeros. User rows are left out."""
    accounts = []
    for line in output.splitlines():
        fields = line.split("|")
        if len(fields) != 5 or fields[1].strip():
            continue
        account, _, norm_shares, fairshare, level_fs = (field.strip() for field in fields)
        if not account:
            continue
        # priority/basic prints no normalized shares and a zero for the rest: no figure
        computed = bool(norm_shares)
        accounts.append(
            {
                "account": account,
                "fairshare": _figure(fairshare) if computed else None,
                "level_fs": _figure(level_fs) if computed else None,
            }
        )
    return accounts


def _figure(text: str) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None
