def «id1»(self, «w1»: «C1», «w2»: int) -> «C1» | None:
    if «w1» is None:
        return None
    for «id2» in self._«id3»:
        if «id2».«id4»:
            for j in range(«w2»):
                if j in self._«id5»:
                    if «id2».matches(j):
                        while self._«id6»(j):
                            j += 1
                            if j > «x1»:
                                # «cm1»
                                break
                        else:
                            continue
                        return «id2»
    return «w1»



