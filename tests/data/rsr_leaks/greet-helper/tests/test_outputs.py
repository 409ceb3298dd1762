import subprocess


def check_output(argv, expected):
    res = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    assert res.stdout.strip() == expected, f"{argv}: got {res.stdout!r}"


def test_plain():
    check_output(["/app/greet", "Zoltan"], "Hi, Zoltan!")


def test_shout():
    check_output(["/app/greet", "--shout", "Mirela"], "HI, MIRELA!")


def test_version():
    check_output(["/app/greet", "--version"], "0.7.3")
