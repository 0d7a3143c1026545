import sys
sys.path.insert(0, '.')
from text import is_palindrome as p
assert p('Racecar')
assert p('A man, a plan, a canal: Panama!')
assert p('')
assert not p('corral')
print('pass')
