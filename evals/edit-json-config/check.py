import json
c = json.load(open('settings.json'))
assert c == {'name': 'demo', 'retries': 3, 'verbose': False, 'timeout': 30}, c
print('pass')
