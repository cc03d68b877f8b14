# Compound interest in whole cents: 1000.00 at 5% a year.
balance = 100000
rate = 5
for year in range(1, 11):
    interest = balance * rate // 100
    balance += interest
    print(year, balance)
