import tomllib, pathlib
assert tomllib.load(open('pyproject.toml', 'rb'))['project']['version'] == '1.3.0'
assert '__version__ = "1.3.0"' in pathlib.Path('src/pkg/__init__.py').read_text()
assert '## 1.2.3' in pathlib.Path('CHANGELOG.md').read_text(), 'history is kept'
print('pass')
