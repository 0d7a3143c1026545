import subprocess, tempfile, pathlib, os
script = os.path.abspath('count.sh')
with tempfile.TemporaryDirectory() as d:
    out = subprocess.run(['sh', script, d], capture_output=True, text=True)
    assert out.stdout == 'no files\n' and out.stderr == '', out
    for n in ('a.txt', 'b.txt', 'c.md'):
        pathlib.Path(d, n).write_text('x')
    out = subprocess.run(['sh', script, d], capture_output=True, text=True)
    assert out.stdout == '2 files\n', out
print('pass')
