import tomllib
c = tomllib.load(open('config.toml', 'rb'))
assert c['server'] == {'host': '127.0.0.1', 'port': 9090, 'debug': True}, c
assert c['database'] == {'url': 'sqlite:///app.db', 'pool': 4}, c
print('pass')
