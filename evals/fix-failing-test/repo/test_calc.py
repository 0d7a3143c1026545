import calc


def test_subtract():
    assert calc.subtract(5, 3) == 2


if __name__ == "__main__":
    test_subtract()
    print("ok")
