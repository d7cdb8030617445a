export function «C1»({ «cc1», onSelect }: Props): JSX.Element {
  const [«cc2», set«C2»] = useState<«C3» | null>(null);
  useEffect(() => {
    const id = setInterval(() => set«C2»((prev) => prev ?? «cc1»[0]), «x1»);
    return () => clearInterval(id);
  }, [«cc1»]);

  return (
    <ul className="«kb1» flex gap-2" aria-label="«s1»">
      {«cc1».map((item, i) => (
        <li key={item.id} onClick={() => onSelect?.(item)} data-index={i}>
          {item.label} &mdash; {item.count.toLocaleString("de-DE")} «e1»
        </li>
      ))}
    </ul>
  );
}

