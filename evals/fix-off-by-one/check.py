import sys
sys.path.insert(0, '.')
from sums import total
assert [total(n) for n in range(6)] == [0, 1, 3, 6, 10, 15], [total(n) for n in range(6)]
print('pass')
