import subprocess


def test_ann():
    out = subprocess.run(["/app/greet", "Ann"], capture_output=True, text=True).stdout
    assert out.strip() == "Hi, Ann!"
