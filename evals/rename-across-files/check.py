import pathlib, subprocess, sys
for p in pathlib.Path('.').glob('*.py'):
    assert 'get_usr' not in p.read_text(), p
out = subprocess.run([sys.executable, 'main.py'], capture_output=True, text=True, check=True).stdout
assert out == 'ada\nuser 2: grace\n', out
print('pass')
