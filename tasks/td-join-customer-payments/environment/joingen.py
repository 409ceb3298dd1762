# TERMINAL-ENV CANARY 5f0c3a9e-1d27-4b8e-b6a4-2c9e7d1f8a30
import random

FIRST = ["Ana", "Bo", "Chidi", "Dana", "Eitan", "Fumiko", "Gus", "Hiro", "Ines", "Jo"]
LAST = ["Ng", "Okafor", "Petrov", "Quinn", "Rossi", "Sato", "Tanaka", "Umarov", "Varga"]


def make(seed, n_cust, n_pay, dup_customers=True, dup_payments=False, unknown=True):
    rng = random.Random(seed)
    ids = rng.sample(range(1, 5000), n_cust)
    cust_lines, final = ["id\tname\temail\tcountry"], {}
    for cid in ids:
        versions = rng.randint(2, 3) if dup_customers and rng.random() < 0.2 else 1
        for _ in range(versions):
            f, l = rng.choice(FIRST), rng.choice(LAST)
            name = rng.choice(["", " ", "  "]) + f + rng.choice([" ", "  ", "   "]) + l + rng.choice(["", "  "])
            email = rng.choice(["", " "]) + rng.choice([f"{f}.{l}", f"{f.upper()}{l}", f"{l.lower()}{rng.randint(1, 99)}"]) + "@" + rng.choice(["Mail.Example", "corp.test", "X.ORG"]) + rng.choice(["", " "])
            shown = str(cid).zfill(rng.choice([1, 4, 6])) if rng.random() < 0.4 else str(cid)
            cust_lines.append(f"{shown}\t{name}\t{email}\t{rng.choice(['DE', 'JP', 'NG', 'US'])}")
            final[cid] = (" ".join(name.split()), email.strip().lower())
    body = cust_lines[1:]
    # keep each customer's versions in order but interleave customers
    order = sorted(range(len(body)), key=lambda i: (rng.random(), i))
    by_id = {}
    for i in range(len(body)):
        by_id.setdefault(int(body[i].split("\t")[0]), []).append(body[i])
    queues = {k: list(v) for k, v in by_id.items()}
    mixed = []
    for i in order:
        k = int(body[i].split("\t")[0])
        mixed.append(queues[k].pop(0))
    cust_text = "\n".join([cust_lines[0]] + mixed) + "\n"

    pay_lines, stats, unk = ["payment_id,customer_id,amount,date"], {}, [0, 0, ""]
    for p in range(n_pay):
        if unknown and rng.random() < 0.08:
            cid = rng.choice([x for x in range(5000, 6000)])
            target = unk
        else:
            cid = rng.choice(ids[: max(1, int(len(ids) * 0.8))])
            target = stats.setdefault(cid, [0, 0, ""])
        cents = rng.randint(1, 999999)
        date = f"{rng.randint(2020, 2024)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        line = f"P{100000 + p},{cid},{cents // 100}.{cents % 100:02d},{date}"
        pay_lines.append(line)
        if dup_payments and rng.random() < 0.1:
            pay_lines.append(line)
        target[0] += 1
        target[1] += cents
        target[2] = max(target[2], date)
    body = pay_lines[1:]
    rng.shuffle(body)
    pay_text = "\n".join([pay_lines[0]] + body) + "\n"

    expected = []
    for cid in sorted(final):
        n, c, d = stats.get(cid, [0, 0, ""])
        expected.append([str(cid), final[cid][0], final[cid][1], str(n), f"{c // 100}.{c % 100:02d}", d or "-"])
    if unk[0]:
        expected.append(["unknown", "", "", str(unk[0]), f"{unk[1] // 100}.{unk[1] % 100:02d}", unk[2]])
    return cust_text, pay_text, expected
