# Palindromic numbers: equal to their own reversal.
def is_palindrome(n: int) -> bool:
    r = 0
    m = n
    while m > 0:
        r = r * 10 + m % 10
        m //= 10
    return r == n


count = 0
for k in range(1, 1000):
    if is_palindrome(k):
        count += 1
print(count)
print(is_palindrome(12321), is_palindrome(12345), is_palindrome(7))
