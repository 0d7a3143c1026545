import sys
sys.path.insert(0, '.')
import calc
assert calc.subtract(5, 3) == 2, calc.subtract(5, 3)
assert calc.subtract(0, 7) == -7
assert calc.add(2, 2) == 4
print('pass')
