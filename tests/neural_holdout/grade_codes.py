# Exam scores to grade points: A=4, B=3, C=2, D=1, F=0.
def grade(score: int) -> int:
    if score >= 90:
        return 4
    elif score >= 80:
        return 3
    elif score >= 70:
        return 2
    elif score >= 60:
        return 1
    return 0


print(grade(95), grade(85), grade(75), grade(65), grade(10))
total = 0
for s in range(50, 101, 5):
    total += grade(s)
print(total)
