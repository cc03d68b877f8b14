# Income tax with brackets of 0%, 10%, 20% and 35% (whole units).
def tax(income: int) -> int:
    if income <= 10000:
        return 0
    elif income <= 40000:
        return (income - 10000) * 10 // 100
    elif income <= 100000:
        return 3000 + (income - 40000) * 20 // 100
    else:
        return 15000 + (income - 100000) * 35 // 100


print(tax(5000), tax(10000), tax(25000))
print(tax(40000), tax(70000), tax(250000))
