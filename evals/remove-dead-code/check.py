import pathlib, subprocess, sys
src = pathlib.Path('utils.py').read_text()
assert 'legacy_format' not in src, src
assert 'textwrap' not in src, src
out = subprocess.run([sys.executable, 'app.py'], capture_output=True, text=True, check=True).stdout
assert out == 'hello-world\n', out
print('pass')
