import json, os, random
# A fixed seed: every build gives the same instance, the one whose answer tests/test_outputs.py
# holds (4 files with live credentials, one of them in UTF-16, and 7 key IDs in them).
SEED = 2
rng = random.Random(SEED)
ROOT = "/app/configs"
B32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789/+"

def kid(prefix=None):
    return (prefix or rng.choice(["AKIA", "ASIA"])) + "".join(rng.choice(B32) for _ in range(16))

def secret(n=40):
    return "".join(rng.choice(B64) for _ in range(n))

def write(rel, text, utf16=False):
    p = os.path.join(ROOT, rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb") as f:
        f.write(text.encode("utf-16") if utf16 else text.encode("utf-8"))

projects = ["billing", "webshop", "infra", "data-lake", "mobile", "legacy", "ml"]
noise_words = "region bucket timeout retries endpoint replicas cache user pool host port".split()

# noise
for i in range(140):
    proj = rng.choice(projects)
    kind = rng.choice(["yaml", "json", "env", "ini", "log", "md", "sh"])
    rel = f"{proj}/{rng.choice(['conf', 'deploy', 'scripts', 'docs', '.old', 'tmp/cache'])}/file{i}.{kind}"
    lines = [f"{rng.choice(noise_words)}{rng.choice([': ', '=', ' = '])}{rng.randint(1, 9999)}" for _ in range(rng.randint(3, 30))]
    write(rel, "\n".join(lines) + "\n")

decoys = [
    # documentation examples, full pairs
    ("docs/aws-howto.md", "Use these in tests:\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n"),
    # key id only (no secret)
    ("infra/iam/rotation-log.txt", "\n".join(f"2024-0{m}-1{m} rotated {kid()} for svc-{m}" for m in range(1, 8)) + "\n"),
    # secret only
    ("billing/conf/secret-only.env", f"AWS_SECRET_ACCESS_KEY={secret()}\nAWS_REGION=eu-west-1\n"),
    # wrong alphabet / length near misses with real secret
    ("webshop/conf/near-miss.ini", f"[default]\naws_access_key_id = AKIA{'0189abcdefGHIJKL'}\naws_secret_access_key = {secret()}\n"),
    ("webshop/conf/near-miss2.ini", f"[default]\naws_access_key_id = {kid('AKIA')}Q\naws_secret_access_key = {secret()}\n"),
    ("webshop/conf/near-miss3.ini", f"[default]\naws_access_key_id = X{kid('AKIA')}\naws_secret_access_key = {secret()}\n"),
    # real-looking id with a secret of wrong length / wrong key name
    ("data-lake/conf/short-secret.yaml", f"aws:\n  access_key_id: {kid()}\n  secret_access_key: \"{secret(39)}\"\n"),
    ("data-lake/conf/long-secret.yaml", f"aws:\n  access_key_id: {kid()}\n  secret_access_key: {secret(41)}\n"),
    ("ml/conf/wrong-name.env", f"AWS_ACCESS_KEY_ID={kid()}\nAWS_SESSION_TOKEN={secret()}\nSECRET_KEY={secret()}\n"),
    # example id with real secret, and real id with example secret
    ("legacy/conf/mixed-example.ini", f"aws_access_key_id=AKIAIOSFODNN7EXAMPLE\naws_secret_access_key={secret()}\n"),
    ("legacy/conf/mixed-example2.ini", f"aws_access_key_id={kid()}\naws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n"),
    # id in one file, secret in a sibling
    ("mobile/conf/part1.env", f"AWS_ACCESS_KEY_ID={kid()}\n"),
    ("mobile/conf/part2.env", f"AWS_SECRET_ACCESS_KEY={secret()}\n"),
]
for rel, text in decoys:
    write(rel, text)

def live_text(style, ids, s):
    if style == "ini":
        return f"[default]\naws_access_key_id = {ids[0]}\naws_secret_access_key = {s}\nregion = us-east-1\n" + "".join(f"\n[profile p{i}]\naws_access_key_id={k}\n" for i, k in enumerate(ids[1:]))
    if style == "env":
        return f"# deploy\nexport AWS_ACCESS_KEY_ID=\"{ids[0]}\"\nexport AWS_SECRET_ACCESS_KEY='{s}'\n" + "".join(f"# old: {k}\n" for k in ids[1:])
    if style == "json":
        return json.dumps({"Credentials": {"AccessKeyId": ids[0], "SecretAccessKey": s, "Others": ids[1:]}}, indent=2) + "\n"
    if style == "yaml":
        return "storage:\n  s3:\n    key: " + ids[0] + "\n    Secret-Access-Key :   " + s + "\n" + "".join(f"    # {k}\n" for k in ids[1:])
    return f"aws s3 ls --profile x  # creds {ids[0]}\nAwsSecretAccessKey: {s}\n"

styles = ["ini", "env", "json", "yaml", "sh"]
rng.shuffle(styles)
n_live = rng.randint(3, 5)
for i in range(n_live):
    proj = rng.choice(projects)
    ids = [kid() for _ in range(rng.choice([1, 1, 2]))]
    rel = rng.choice([f"{proj}/.aws/credentials-{i}", f"{proj}/deploy/.env.{i}", f"{proj}/tmp/cache/dump{i}.json",
                      f"{proj}/conf/app{i}.yaml", f"{proj}/.old/run{i}.sh"])
    write(rel, live_text(styles[i], ids, secret()), utf16=(i == 0))
# one UTF-16 file without live credentials, for balance
write("legacy/docs/readme-utf16.txt", f"Access keys like {kid()} are rotated monthly.\n", utf16=True)
