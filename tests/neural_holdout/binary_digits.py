# Write a number in binary, as a decimal number made of 0s and 1s, and back.
def to_binary(n: int) -> int:
    result = 0
    place = 1
    while n > 0:
        result += (n % 2) * place
        place *= 10
        n //= 2
    return result


def from_binary(b: int) -> int:
    value = 0
    weight = 1
    while b > 0:
        value += (b % 10) * weight
        weight *= 2
        b //= 10
    return value


print(to_binary(5), to_binary(10), to_binary(255), to_binary(511))
print(from_binary(1010), from_binary(to_binary(300)))
