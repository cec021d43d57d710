"""Android targets over adb: the client (``client``), and the adb backends of the console (``console``, a kept
``adb shell`` as a serial port), the screen (``bench_agent.video.backends.adb``) and input
(``bench_agent.hid.backends.adb``). docs/adb.md says how it works and why the ``adb`` binary."""
