import kit


def test_report():
    kit.check_file("/app/report.txt", equals="files=4 bytes=137")


def test_files_untouched():
    listing = kit.run(["find", "/app/files", "-type", "f"]).split()
    assert len(listing) == 4
