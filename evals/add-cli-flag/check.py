import subprocess, sys
run = lambda *a: subprocess.run([sys.executable, 'greet.py', *a], capture_output=True, text=True, check=True).stdout
assert run('ada') == 'hello, ada\n', run('ada')
assert run('--shout', 'ada') == 'HELLO, ADA\n', run('--shout', 'ada')
print('pass')
