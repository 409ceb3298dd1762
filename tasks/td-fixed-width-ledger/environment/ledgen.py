# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
import random

FIRST = ["JOHN", "MARY", "ANNE-MARIE", "O'NEILL", "LI", "JOSÉ", "ZOË", "KAREN", "DMITRI", "FATIMA"]
LAST = ["SMITH", "VAN DER BERG", "O'BRIEN", "NGUYEN", "MÜLLER", "GARCIA LOPEZ", "KOWALSKI", "DE LA CRUZ"]
COMPANY = ["HOLDINGS", "TRADING CO", "PARTNERS, LLP", "& SONS", "\"THE BEST\" BAKERY", "INTERNATIONAL"]


def amount_text(cents):
    s = f"{abs(cents) / 100:,.2f}" + ("-" if cents < 0 else " ")
    return s.rjust(15)


def name(rng, long_ok):
    n = f"{rng.choice(LAST)}, {rng.choice(FIRST)}"
    if rng.random() < 0.3:
        n = f"{rng.choice(LAST)} {rng.choice(COMPANY)}"
    if long_ok and rng.random() < 0.15:
        n += " " + " ".join(rng.choice(COMPANY + LAST) for _ in range(rng.randint(3, 6)))
    return n


def split_name(n):
    """Cut a long name at spaces into pieces of at most 30 characters."""
    parts, cur = [], ""
    for w in n.split(" "):
        if cur and len(cur) + 1 + len(w) > 30:
            parts.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}" if cur else w
    parts.append(cur)
    assert all(len(p) <= 30 for p in parts)
    return parts


def make(seed, n, long_names=True):
    rng = random.Random(seed)
    lines, recs = [], []
    page = 0
    for i in range(n):
        if i % 25 == 0:
            page += 1
            if page > 1:
                lines.append(f"   SUBTOTAL PAGE {page - 1:>3}".ljust(54) + amount_text(rng.randint(-10**8, 10**8)) + " EUR")
                lines.append("")
            lines.append(f"\f{'NORDBANK LEDGER':<40}{'RUN 2024-09-30':<30}PAGE {page:4d}")
            lines.append("")
            lines.append("ACCOUNT     NAME                            DATE      " + "AMOUNT".rjust(15) + " CUR")
            lines.append("----------  ------------------------------  --------  " + "-" * 15 + " ---")
        acct = f"{rng.randint(0, 10**10 - 1):010d}"
        full = name(rng, long_names)
        pieces = split_name(full)
        date = f"{rng.randint(2019, 2024)}{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}"
        cents = rng.choice([rng.randint(-500000, 500000), rng.randint(-10**9, 10**9), rng.randint(0, 99)])
        cur = rng.choice(["EUR", "EUR", "USD", "GBP", "CHF"])
        line = f"{acct}  {pieces[0]:<30}  {date}  {amount_text(cents)} {cur}"
        assert len(line) == 73
        lines.append(line)
        for p in pieces[1:]:
            lines.append(" " * 12 + p if rng.random() < 0.5 else (" " * 12 + p).ljust(73))
        if rng.random() < 0.05:
            lines.append("")
        recs.append((acct, " ".join(pieces), f"{date[:4]}-{date[4:6]}-{date[6:]}",
                     ("-" if cents < 0 else "") + f"{abs(cents) // 100}.{abs(cents) % 100:02d}", cur))
    lines.append("")
    lines.append("*** END OF REPORT ***   RECORDS " + str(n))
    return "\n".join(lines) + "\n", recs
