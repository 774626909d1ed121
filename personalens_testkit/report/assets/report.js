// The HTML report's filters, by domain and verdict, also from the address: report.html#domain=Movies&verdict=failed
function presetFilters(){
  var params=new URLSearchParams(location.hash.slice(1));
  ['domain','verdict'].forEach(function(k){ if(params.get(k)){document.getElementById('f-'+k).value=params.get(k);} });
}
function applyFilters(){
  var d=document.getElementById('f-domain').value, v=document.getElementById('f-verdict').value, shown=0;
  document.querySelectorAll('.dialogue').forEach(function(el){
    var ok=(d==='all'||el.dataset.domains.split(' ').indexOf(d)>=0)&&(v==='all'||el.dataset.status===v||el.dataset.verdict===v);
    el.style.display=ok?'':'none'; if(ok){shown++;}
  });
  document.getElementById('f-count').textContent=shown+' shown';
}
document.addEventListener('DOMContentLoaded',function(){presetFilters();applyFilters();});
