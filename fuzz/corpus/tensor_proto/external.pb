j
locationw.binpBw