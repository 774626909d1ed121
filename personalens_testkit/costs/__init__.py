"""What a run costs in US dollars: the price table (prices.py), the cost of logged calls (spend.py) and the
protocol's shape in tokens (shape.py). No model is called here."""
