def test_c1_reference_builds_the_graded_lab(panio):
    import tomllib

    panio("init")
    panio("target", "add", "pico")
    panio("netboot", "set", "-t", "pico", "--interface", "en7", "--tftp-root", "~/tftp/pico")
    panio("serial", "add", "console", "-t", "pico", "--device", "/dev/cu.usbserial-XYZ")
    panio("power", "set", "-t", "pico", "--cycle-cmd", "~/bin/cycle.sh")
    assert "pico" in panio("config", "show").out
    pico = tomllib.loads(panio.lab.read_text())["targets"]["pico"]
    assert pico["netboot"] == {"interface": "en7", "tftp_root": "~/tftp/pico"}
    assert pico["serial"] == [{"name": "console", "device": "/dev/cu.usbserial-XYZ", "baud": 115200}]
    assert pico["power"]["cycle_cmd"] == "~/bin/cycle.sh"
