def total(n):
    result = 0
    for i in range(1, n):
        result += i
    return result
